/* gpu_internal.h - shared by the .cu files of src/cuda only (C++, nvcc). */
#ifndef PT_CUDA_GPU_INTERNAL_H
#define PT_CUDA_GPU_INTERNAL_H

#include <cuda_runtime.h>

#include "cuda/gpu.h"

/* One line "CUDA <what> failed: <message> (<name>)", PT_E_IO. */
enum pt_status pt_gpu_fail(struct pt_error *err, cudaError_t e, const char *what);
/* PT_OK, or the launch error of the kernel just queued. */
enum pt_status pt_gpu_launched(struct pt_error *err, const char *what);

#endif

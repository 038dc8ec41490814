/* gpu_device.cu - device discovery, memory and error reporting for the CUDA backend. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "cuda/gpu.h"
#include "cuda/gpu_internal.h"

enum pt_status pt_gpu_fail(struct pt_error *err, cudaError_t e, const char *what)
{
	return pt_error_set(err, PT_E_IO, "CUDA %s failed: %s (%s)", what, cudaGetErrorString(e),
			    cudaGetErrorName(e));
}

enum pt_status pt_gpu_open(int device, struct pt_gpu_info *info, struct pt_error *err)
{
	memset(info, 0, sizeof *info);
	int drv = 0;
	cudaError_t e = cudaDriverGetVersion(&drv);
	if (e != cudaSuccess || drv == 0)
		return pt_error_set(err, PT_E_UNSUPPORTED,
				    "no NVIDIA driver found (libcuda could not be loaded); the CUDA "
				    "backend needs an NVIDIA GPU and its driver");
	int n = 0;
	e = cudaGetDeviceCount(&n);
	if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0))
		return pt_error_set(err, PT_E_UNSUPPORTED, "no CUDA device found (driver %d.%d)",
				    drv / 1000, drv % 1000 / 10);
	if (e == cudaErrorInsufficientDriver)
		return pt_error_set(err, PT_E_UNSUPPORTED,
				    "the NVIDIA driver (%d.%d) is older than this build's CUDA "
				    "runtime (%d.%d)",
				    drv / 1000, drv % 1000 / 10, CUDART_VERSION / 1000,
				    CUDART_VERSION % 1000 / 10);
	if (e != cudaSuccess)
		return pt_gpu_fail(err, e, "device count");
	if (device < 0 || device >= n)
		return pt_error_set(err, PT_E_UNSUPPORTED,
				    "--gpu-device %d: only %d CUDA device%s visible", device, n,
				    n == 1 ? " is" : "s are");
	if ((e = cudaSetDevice(device)) != cudaSuccess)
		return pt_gpu_fail(err, e, "set device");
	cudaDeviceProp p;
	if ((e = cudaGetDeviceProperties(&p, device)) != cudaSuccess)
		return pt_gpu_fail(err, e, "device properties");
	size_t fr = 0, tot = 0;
	if ((e = cudaMemGetInfo(&fr, &tot)) != cudaSuccess)
		return pt_gpu_fail(err, e, "memory info");
	info->device = device;
	info->n_devices = n;
	snprintf(info->name, sizeof info->name, "%s", p.name);
	info->cc_major = p.major;
	info->cc_minor = p.minor;
	info->n_sm = p.multiProcessorCount;
	info->total_bytes = tot;
	info->free_bytes = fr;
	info->driver_version = drv;
	cudaRuntimeGetVersion(&info->runtime_version);
	return PT_OK;
}

enum pt_status pt_gpu_alloc(void **dptr, size_t bytes, struct pt_error *err)
{
	*dptr = NULL;
	cudaError_t e = cudaMalloc(dptr, bytes ? bytes : 1);
	if (e != cudaSuccess) {
		*dptr = NULL;
		return pt_error_set(err, PT_E_NOMEM, "CUDA allocation of %zu bytes failed: %s",
				    bytes, cudaGetErrorString(e));
	}
	return PT_OK;
}

void pt_gpu_free(void *dptr)
{
	if (dptr)
		cudaFree(dptr);
}

enum pt_status pt_gpu_upload(void *dst, const void *src, size_t bytes, struct pt_error *err)
{
	cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
	return e == cudaSuccess ? PT_OK : pt_gpu_fail(err, e, "host-to-device copy");
}

enum pt_status pt_gpu_download(void *dst, const void *src, size_t bytes, struct pt_error *err)
{
	cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
	return e == cudaSuccess ? PT_OK : pt_gpu_fail(err, e, "device-to-host copy");
}

enum pt_status pt_gpu_sync(struct pt_error *err)
{
	cudaError_t e = cudaDeviceSynchronize();
	if (e == cudaSuccess)
		e = cudaGetLastError();
	return e == cudaSuccess ? PT_OK : pt_gpu_fail(err, e, "kernel");
}

enum pt_status pt_gpu_launched(struct pt_error *err, const char *what)
{
	cudaError_t e = cudaGetLastError();
	return e == cudaSuccess ? PT_OK : pt_gpu_fail(err, e, what);
}
cudaStream_t pt_gpu_stream = 0;

enum pt_status pt_gpu_h2d_bandwidth(double *bps, struct pt_error *err)
{
	const size_t bytes = 256u << 20;
	void *h = NULL, *d = NULL;
	cudaEvent_t a = NULL, b = NULL;
	*bps = 0.0;
	cudaError_t e = cudaMallocHost(&h, bytes);
	if (e == cudaSuccess)
		e = cudaMalloc(&d, bytes);
	if (e == cudaSuccess)
		e = cudaEventCreate(&a);
	if (e == cudaSuccess)
		e = cudaEventCreate(&b);
	if (e == cudaSuccess)
		memset(h, 1, bytes); /* touched: the copies measure the link, not page faults */
	for (int i = 0; e == cudaSuccess && i < 4; i++) {
		float ms = 0.0f;
		e = cudaEventRecord(a, 0);
		if (e == cudaSuccess)
			e = cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, 0);
		if (e == cudaSuccess)
			e = cudaEventRecord(b, 0);
		if (e == cudaSuccess)
			e = cudaEventSynchronize(b);
		if (e == cudaSuccess)
			e = cudaEventElapsedTime(&ms, a, b);
		if (e == cudaSuccess && ms > 0.0f && bytes / (ms * 1e-3) > *bps)
			*bps = bytes / (ms * 1e-3);
	}
	if (a)
		cudaEventDestroy(a);
	if (b)
		cudaEventDestroy(b);
	cudaFree(d);
	cudaFreeHost(h);
	return e == cudaSuccess ? PT_OK : pt_gpu_fail(err, e, "bandwidth probe");
}

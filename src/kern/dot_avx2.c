/* placeholder replaced below */
#include "kern/kern_internal.h"
const pt_kern_dot_fn pt_kern_dot_avx2[PT_TYPE_COUNT] = { 0 };

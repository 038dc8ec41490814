/* blocks.c - the value tables that blocks.h declares (GGUF-AND-QUANTS.md 4.8, 5.8). */
#include "quant/blocks.h"

/* ascending, as best-index searches require */
const int8_t pt_kvalues_iq4nl[16] = {
	-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
};

/* E2M1 magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 doubled; code 8 is -0 */
const int8_t pt_kvalues_mxfp4[16] = {
	0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
};

#ifndef TALLY_H
#define TALLY_H

#include <stddef.h>

#define TALLY_VERSION "1.2.0"

/* Sum of n values. */
long tally_sum(const int *values, size_t n);

/* Arithmetic mean of n values; 0.0 when n == 0. */
double tally_mean(const int *values, size_t n);

/* Number of values strictly greater than threshold. */
size_t tally_count_above(const int *values, size_t n, int threshold);

const char *tally_version(void);

#endif

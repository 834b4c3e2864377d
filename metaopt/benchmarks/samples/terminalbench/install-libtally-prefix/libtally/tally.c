#include "tally.h"

long tally_sum(const int *values, size_t n)
{
    long total = 0;
    for (size_t i = 0; i < n; i++)
        total += values[i];
    return total;
}

double tally_mean(const int *values, size_t n)
{
    return n ? (double)tally_sum(values, n) / (double)n : 0.0;
}

size_t tally_count_above(const int *values, size_t n, int threshold)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        if (values[i] > threshold)
            count++;
    return count;
}

const char *tally_version(void)
{
    return TALLY_VERSION;
}

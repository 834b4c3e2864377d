#ifndef STATS_H
#define STATS_H

#include <stddef.h>

struct stats {
    size_t count;
    long long sum;
    long long min;
    long long max;
};

void stats_init(struct stats *s);
void stats_add(struct stats *s, long long value);
double stats_mean(const struct stats *s);

#endif

#include "stats.h"

void stats_init(struct stats *s)
{
    s->count = 0;
    s->sum = 0;
    s->min = 0;
    s->max = 0;
}

void stats_add(struct stats *s, long long value)
{
    if (s->count == 0 || value < s->min)
        s->min = value;
    if (s->count == 0 || value > s->max)
        s->max = value;
    s->sum += value;
    s->count++;
}

double stats_mean(const struct stats *s)
{
    return s->count ? (double)s->sum / s->count : 0.0;
}

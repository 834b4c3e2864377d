#include <stdio.h>

int main(void)
{
    struct stats s;
    long long value;

    stats_init(&s);
    while (scanf("%lld", &value) == 1)
        stats_add(&s, value);

    if (s.count == 0) {
        printf("count=0\n");
        return 0;
    }
    printf("count=%zu sum=%lld min=%lld max=%lld mean=%.2f\n",
           s.count, s.sum, s.min, s.max, stats_mean(&s))
    return 0;
}

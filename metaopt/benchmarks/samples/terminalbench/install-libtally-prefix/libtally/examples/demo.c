#include <stdio.h>
#include <stdlib.h>
#include <tally/tally.h>

int main(int argc, char **argv)
{
    int values[64];
    size_t n = 0;
    for (int i = 1; i < argc && n < 64; i++)
        values[n++] = atoi(argv[i]);
    printf("libtally %s: n=%zu sum=%ld mean=%.2f above10=%zu\n", tally_version(), n,
           tally_sum(values, n), tally_mean(values, n), tally_count_above(values, n, 10));
    return 0;
}

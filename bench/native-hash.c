/* `dolphin bench core`'s native yardstick: the same chained xxh64 block hashing as assembly/blocks.ts (token mode,
 * 16-token blocks, root = xxh64 of no bytes) over the same 20,000-token LCG prompt, with libxxhash's own XXH64
 * (header-only, XXH_INLINE_ALL) built -O3 -march=native. Prints the median microseconds per prompt over `runs`
 * timed batches of `batch` prompts and the last block hash (hex), so the caller can check both sides hashed the
 * same thing. Usage: native-hash [tokens] [seed] [runs] [batch]   (bench/core.ts builds it with cc when xxhash.h
 * exists, and runs it in short slices alternated with the core's own hashing). */
#define XXH_INLINE_ALL
#include <xxhash.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK_TOKENS 16

static uint64_t hash_prompt(const uint32_t *tokens, int n) {
  uint64_t prev = XXH64(NULL, 0, 0);
  uint64_t pair[2];
  for (int i = 0; i + BLOCK_TOKENS <= n; i += BLOCK_TOKENS) {
    pair[0] = XXH64(tokens + i, BLOCK_TOKENS * 4, 0); /* little-endian host: the u32 ids are the bytes hashed */
    pair[1] = prev;
    prev = XXH64(pair, 16, 0);
  }
  return prev;
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 20000;
  uint32_t seed = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 42;
  int runs = argc > 3 ? atoi(argv[3]) : 201;
  int batch = argc > 4 ? atoi(argv[4]) : 20;
  if (n <= 0 || runs <= 0 || batch <= 0) {
    fprintf(stderr, "native-hash: tokens, runs and batch must be positive\n");
    return 2;
  }
  uint32_t *tokens = malloc(sizeof(uint32_t) * (size_t)n);
  double *us = malloc(sizeof(double) * (size_t)runs);
  if (!tokens || !us) return 1;
  uint32_t x = seed; /* the same LCG as bench/core.ts lcgTokens */
  for (int i = 0; i < n; i++) { x = (x * 1103515245u + 12345u) & 0x7fffffffu; tokens[i] = x % 152064u; }
  volatile uint64_t sink = 0;
  for (int r = 0; r < runs; r++) {
    double t0 = now_us();
    for (int b = 0; b < batch; b++) {
      __asm__ volatile("" ::: "memory"); /* the prompt "may have changed": no hoisting the hash out of the loop */
      sink ^= hash_prompt(tokens, n);
    }
    us[r] = (now_us() - t0) / batch;
  }
  qsort(us, (size_t)runs, sizeof(double), cmp);
  printf("%.3f %016llx\n", us[runs / 2], (unsigned long long)hash_prompt(tokens, n));
  return sink == 1 ? 1 : 0;
}

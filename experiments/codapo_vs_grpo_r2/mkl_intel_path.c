/*
 * Put MKL (statically linked into torch's CPU wheel) on its Intel code path on an AMD CPU.
 *
 * Why: MKL picks its GEMM kernels by CPU vendor. On an AMD EPYC it takes its AMD path, whose float32 sums round
 * differently from its Intel path, the one the pinned warm start was made on (a Xeon re-make matched it byte for
 * byte), so the registered warm-start command re-makes different weights there
 * (results/warm_start_v4_remade_2026-11-29/mkl_amd_path/). With this shim preloaded, the same command re-makes the
 * pinned weights byte for byte (results/warm_start_v4_remade_2026-11-29/), and a campaign run computes with MKL's
 * Intel kernels, as the Xeon runs did.
 *
 * Build and use (only on an AMD CPU; on an Intel CPU MKL already takes this path):
 *     gcc -shared -fPIC -O2 -o /tmp/mkl_intel_path.so experiments/codapo_vs_grpo_r2/mkl_intel_path.c
 *     LD_PRELOAD=/tmp/mkl_intel_path.so OMP_NUM_THREADS=2 .venv/bin/python experiments/codapo_vs_grpo/run.py ...
 *
 * It works because torch's libtorch_cpu.so exports these MKL service functions, so a preloaded definition wins.
 */
int mkl_serv_intel_cpu_true(void) { return 1; }
int mkl_serv_intel_cpu(void) { return 1; }
int mkl_serv_cpuiszen(void) { return 0; }

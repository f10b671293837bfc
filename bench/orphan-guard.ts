/**
 * Preloaded into every process the benchmark starts (`node --import tsx --import ./bench/orphan-guard.ts …`),
 * so none of them can outlive the run:
 *
 * - when the parent's IPC channel closes (the orchestrator exited, normally or not, even on SIGKILL),
 *   the process sends itself SIGTERM (its own graceful stop) and exits for sure 3 s later;
 * - whatever happens, it exits after `BENCH_CHILD_MAX_MS` (default 15 minutes).
 *
 * Both timers are unref'd: they never keep a process alive that would otherwise end.
 */
const maxLifetimeMs = Number(process.env.BENCH_CHILD_MAX_MS ?? 15 * 60_000);

function hardExit(code: number, why: string): void {
  process.stderr.write(`[bench child ${process.pid}] ${why}; exiting\n`);
  process.exit(code);
}

if (process.send) {
  process.once('disconnect', () => {
    setTimeout(() => hardExit(1, 'parent gone, graceful stop took too long'), 3_000).unref();
    process.kill(process.pid, 'SIGTERM');
  });
}

setTimeout(() => hardExit(3, `lifetime cap of ${maxLifetimeMs} ms reached`), maxLifetimeMs).unref();

/**
 * What the conduit and gateway launchers share: listen on 127.0.0.1:0, print one JSON line
 * `{"url", "pid"}` on stdout, answer the orchestrator's IPC questions, and stop cleanly on SIGTERM,
 * SIGINT or when the orchestrator goes away (see `orphan-guard.ts`).
 *
 * IPC (the process is spawned with `--expose-gc` and an `ipc` stdio slot):
 *   `{type: 'gc'}`  → runs `global.gc()` twice, answers `{type: 'gc', memory: process.memoryUsage()}`
 *   `{type: 'cpu'}` → answers `{type: 'cpu', cpu: process.cpuUsage()}`
 * An `id` in the question is echoed in the answer.
 */
import type { FastifyInstance } from 'fastify';

export interface BenchQuestion {
  type: 'gc' | 'cpu';
  id?: number;
}

export type BenchAnswer =
  | { type: 'gc'; id?: number; memory: NodeJS.MemoryUsage }
  | { type: 'cpu'; id?: number; cpu: NodeJS.CpuUsage };

export function answerQuestions(): void {
  process.on('message', (message: BenchQuestion) => {
    const id = message?.id;
    if (message?.type === 'gc') {
      if (typeof global.gc !== 'function') throw new Error('spawn with --expose-gc');
      // Two passes: the first may only queue finalizers and weak-reference clean-up for the second.
      global.gc();
      global.gc();
      send({ type: 'gc', id, memory: process.memoryUsage() });
    } else if (message?.type === 'cpu') {
      send({ type: 'cpu', id, cpu: process.cpuUsage() });
    }
  });
}

function send(answer: BenchAnswer): void {
  process.send?.(answer);
}

/** Listens, announces the URL, and installs the stop handlers. Never returns a rejected promise: failures exit 1. */
export async function launch(name: string, start: () => Promise<FastifyInstance>, onStop?: () => Promise<void>) {
  let app: FastifyInstance | undefined;
  let stopping = false;
  const stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    // Exiting writes a `--cpu-prof` profile, the orchestrator's SIGKILL (after 5 s) loses it: when profiling,
    // leave at once (what a clean close would do is not what is being profiled).
    if (process.env.BENCH_CPU_PROF_DIR) process.exit(code);
    setTimeout(() => process.exit(code === 0 ? 1 : code), 5_000).unref();
    // Each step on its own: a failed close must not keep the clean-up from running.
    await app?.close().catch((error: unknown) => process.stderr.write(`${name} close failed: ${String(error)}\n`));
    await onStop?.().catch((error: unknown) => process.stderr.write(`${name} clean-up failed: ${String(error)}\n`));
    process.exit(code);
  };
  process.on('SIGTERM', () => void stop(0));
  process.on('SIGINT', () => void stop(0));
  try {
    app = await start();
    await app.listen({ host: '127.0.0.1', port: 0 });
    const address = app.server.address();
    if (address === null || typeof address === 'string') throw new Error('no TCP address');
    answerQuestions();
    process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${address.port}`, pid: process.pid })}\n`);
  } catch (error) {
    process.stderr.write(`${name} failed to start: ${error instanceof Error ? error.stack : String(error)}\n`);
    await stop(1);
  }
}

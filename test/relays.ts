// Relays a test puts between the proxy and a worker to make a fault on purpose, against emulated workers
// (serve-kv-repair, serve-abandoned) and real vLLM engines (test/engines/) alike: a ZMQ relay of KV events that
// drops batches while told to, and an HTTP relay that holds a prefill's answer half sent.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { loadZeromq } from "../src/serve/zeromq.js";

export interface LossyRelay {
  /** The relay's PUB endpoint: the worker's kv_events_endpoint in the proxy's config. */
  endpoint: string;
  /** While set, every batch is dropped (counted in `dropped`). */
  dropping: boolean;
  dropped: number;
  /** Batches passed on. */
  passed: number;
  close(): Promise<void>;
}

/** A ZMQ relay of the KV events published at `from` (frames passed on unchanged) that drops them while `dropping`. */
export async function lossyRelay(from: string): Promise<LossyRelay> {
  const { zmq } = await loadZeromq();
  if (!zmq) throw new Error("the zeromq package is not installed: run npm install");
  const sub = new zmq.Subscriber();
  const pub = new zmq.Publisher();
  await pub.bind("tcp://127.0.0.1:*");
  sub.connect(from);
  sub.subscribe();
  const relay: LossyRelay = {
    endpoint: pub.lastEndpoint!,
    dropping: false,
    dropped: 0,
    passed: 0,
    async close() {
      sub.close();
      pub.close();
    },
  };
  void (async () => {
    try {
      for await (const frames of sub) {
        if (relay.dropping) relay.dropped++;
        else {
          relay.passed++;
          await pub.send(frames);
        }
      }
    } catch {
      // closed
    }
  })();
  return relay;
}

export interface HoldingRelay {
  url: string;
  /** Resolves when a prefill's answer (headers and its first half) went out. */
  answerBegan: Promise<void>;
  /** Sends the rest of the held answer. */
  release(): void;
  close(): Promise<void>;
}

/**
 * An HTTP relay in front of `to`: passes every call on, but holds back the second half of a prefill's answer (a
 * request with `"do_remote_decode":true`: the worker has answered, and holds the prompt's blocks for the handoff)
 * until `release` is called.
 */
export async function holdingRelay(to: string): Promise<HoldingRelay> {
  let began!: () => void;
  const answerBegan = new Promise<void>((r) => (began = r));
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const body = Buffer.concat(chunks);
      let answer: Response;
      let bytes: Buffer;
      try {
        answer = await fetch(`${to}${req.url}`, {
          method: req.method ?? "GET",
          headers: { "content-type": "application/json" },
          ...(req.method === "POST" ? { body } : {}),
        });
        bytes = Buffer.from(await answer.arrayBuffer());
      } catch {
        return res.destroy(); // the worker is gone (killed, or stopped before the relay): so is its answer
      }
      res.writeHead(answer.status, { "content-type": "application/json", "content-length": bytes.length });
      if (!body.includes('"do_remote_decode":true')) return res.end(bytes);
      res.write(bytes.subarray(0, bytes.length >> 1));
      began();
      await released;
      res.end(bytes.subarray(bytes.length >> 1));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    answerBegan,
    release,
    close: () =>
      new Promise<void>((r) => {
        release();
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

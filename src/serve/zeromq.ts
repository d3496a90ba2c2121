// zeromq, an optional dependency, loaded once on demand. Without it the proxy takes KV events only through
// POST /admin/kv-events and the emulated worker only POSTs them (both say so in their logs).

/** vLLM's KV-event subscriber side (the proxy). */
export interface ZmqSubscriber {
  connect(endpoint: string): void;
  subscribe(...topics: string[]): void;
  close(): void;
  [Symbol.asyncIterator](): AsyncIterator<Buffer[]>;
}

/** vLLM's KV-event publisher side (the emulated worker). */
export interface ZmqPublisher {
  bind(endpoint: string): Promise<void>;
  send(frames: (string | Buffer | Uint8Array)[]): Promise<void>;
  close(): void;
  readonly lastEndpoint: string | null;
}

/** The client of vLLM's KV-event replay socket (a ROUTER at kv_events_config.replay_endpoint). */
export interface ZmqDealer {
  connect(endpoint: string): void;
  send(frames: (string | Buffer | Uint8Array)[]): Promise<void>;
  receive(): Promise<Buffer[]>;
  /** Milliseconds receive() waits before it rejects (EAGAIN); -1 waits for ever. */
  receiveTimeout: number;
  linger: number;
  close(): void;
}

export interface Zeromq {
  Subscriber: new () => ZmqSubscriber;
  Publisher: new () => ZmqPublisher;
  Dealer: new () => ZmqDealer;
}

/** The module, or why it could not be loaded. */
export type ZeromqLoad = { zmq: Zeromq; unavailable?: undefined } | { zmq: null; unavailable: string };

let loading: Promise<ZeromqLoad> | null = null;

export function loadZeromq(): Promise<ZeromqLoad> {
  const specifier = "zeromq"; // a variable, so type checking does not need the package
  loading ??= import(specifier).then(
    (m): ZeromqLoad => {
      const zmq = m?.Subscriber ? m : m?.default?.Subscriber ? m.default : null;
      return zmq ? { zmq: zmq as Zeromq } : { zmq: null, unavailable: "the zeromq module has no Subscriber export" };
    },
    (e: unknown): ZeromqLoad => ({ zmq: null, unavailable: (e as Error)?.message ?? String(e) }),
  );
  return loading;
}

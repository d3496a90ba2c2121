// Seeded synthetic workloads for the simulator: the paper's hybrid mix, its three single-type parts (arxiv, leval,
// humaneval) and multi-turn chat, each prompt described by content segments and hashed into chained blocks
// (segmentBlocks in workload.ts).

import { Rng } from "./rng.js";
import { type SimRequest, type Workload } from "./types.js";
import {
  checkOptions,
  clampRound,
  finish,
  GENERATORS,
  poissonArrivals,
  segmentBlocks,
  workloadMessages as msg,
  WorkloadError,
  type GeneratorName,
  type Segment,
  type WorkloadOptions,
} from "./workload.js";

// ---------------------------------------------------------------------------------------------------------------
// Synthetic generators.
//
// Sources: data/README.md (the DolphinRouting explainer's published averages; the lengths files; the traces) and our
// own measurement of the Mooncake trace. Lengths are rounded and clamped lognormals "with mean m" (log-space
// σ given); the clamps move the means by < 1%.
//
// arxiv      prompt mean 8,088 (ArXiv summarization, unfiltered, explainer), σ 0.5, clamp 1,024–30,000; output mean
//            291, σ 0.22, clamp 32–1,024 (lengths_arxiv…csv: output mean 291 / p90 372; σ 0.22 gives p90 ≈ 377).
//            Cold: every prompt is unique content. Default 2 req/s (≈ 16k uncached prompt tokens/s).
// leval      prompt = one of 16 shared documents (16,000–18,000 tokens, uniform, drawn once) + a unique question of
//            1,019–3,019 tokens (uniform): mean 19,019 (L-Eval, explainer). Documents picked uniformly, so all but
//            the first request per document reuse ~17k / 19k ≈ 0.89 of the prompt (explainer: >80% prefix-cache hits).
//            16 documents hold ~272k tokens of KV. Output mean 180, σ 0.4, clamp 16–800 (no published figure; an
//            assumption: short answers, p10 ≈ 100, p90 ≈ 280). Default 2 req/s (≈ 4k uncached prompt tokens/s).
// humaneval  prompt = a shared 32-token instruction + a unique problem with mean 166, σ 0.45, clamp 32–1,024: mean 198
//            (HumanEval, explainer). Output mean 220, σ 0.4, clamp 32–768 (an assumption: code with a little prose,
//            p10 ≈ 120, p90 ≈ 340). Default 10 req/s.
// hybrid     the paper's mix: equal thirds of arxiv, leval and humaneval by request count, in a random order, one
//            Poisson arrival process. Mean prompt ≈ (8,088 + 19,019 + 198) / 3 ≈ 9,100. Default 3 req/s.
// multiturn  sessions with WildChat statistics (explainer): turns per session geometric with mean 2.54 (cap 40);
//            user turn mean 296, σ 1.0, clamp 4–16,384; assistant turn (the output) mean 441, σ 0.7, clamp 4–4,096.
//            Turn k's prompt = turn k−1's prompt + its output + the new user input, so its blocks extend turn k−1's
//            chain (the output has content of its own); a session ends early if a prompt would pass 32,768 tokens.
//            Sessions start as a Poisson process at rate / 2.54. Turn k+1 arrives when turn k would plausibly have
//            finished (1 s to first token + 30 ms per output token) plus a think time, lognormal with median 110 s
//            and σ 1.0 — fitted to the Mooncake trace's gaps from a turn to the next (p10 42 s, median 123 s, p90 459 s
//            as measured with traces.ts's session detection). `rate` (default 4 req/s) is the steady-state request
//            rate. Sessions are kept whole, so a 2,000-request workload ramps up over its first minutes and its long
//            sessions trail for up to an hour: measured with the defaults, ~2.5 req/s over the middle half of the
//            requests and a mean rate (n − 1) / span of ~0.5 req/s (Workload.rate reports the latter; withLoad scales
//            think times with everything else). The last session is cut so the workload has exactly `requests`.

export const DEFAULT_REQUESTS = 2000;

/** A lognormal length: arithmetic mean, log-space σ, clamp. */
interface LengthDist {
  mean: number;
  sigma: number;
  min: number;
  max: number;
}

const draw = (rng: Rng, d: LengthDist): number => clampRound(rng.lognormalWithMean(d.mean, d.sigma), d.min, d.max);

export const GENERATOR_PARAMS = {
  arxiv: {
    rate: 2,
    prompt: { mean: 8088, sigma: 0.5, min: 1024, max: 30_000 },
    output: { mean: 291, sigma: 0.22, min: 32, max: 1024 },
  },
  leval: {
    rate: 2,
    documents: 16,
    documentTokens: { min: 16_000, max: 18_000 },
    questionTokens: { min: 1019, max: 3019 },
    output: { mean: 180, sigma: 0.4, min: 16, max: 800 },
  },
  humaneval: {
    rate: 10,
    instructionTokens: 32,
    problem: { mean: 166, sigma: 0.45, min: 32, max: 1024 },
    output: { mean: 220, sigma: 0.4, min: 32, max: 768 },
  },
  hybrid: { rate: 3 },
  multiturn: {
    rate: 4,
    turnsMean: 2.54,
    maxTurns: 40,
    maxPromptTokens: 32_768,
    user: { mean: 296, sigma: 1.0, min: 4, max: 16_384 },
    assistant: { mean: 441, sigma: 0.7, min: 4, max: 4096 },
    ttftMs: 1000,
    tpotMs: 30,
    thinkMedianMs: 110_000,
    thinkSigma: 1.0,
  },
} as const;

/** One generated request before arrival times and ids. */
interface Draft {
  promptTokens: number;
  outputTokens: number;
  segments: Segment[];
  type: string;
}

/** Content ids and the shared pieces (L-Eval documents, the HumanEval instruction) of one generated workload. */
class Content {
  private next = 0;
  private documents: Segment[] | undefined;
  private instruction: Segment | undefined;

  constructor(private readonly rng: Rng) {}

  fresh(tokens: number): Segment {
    return { id: this.next++, tokens };
  }

  document(): Segment {
    const p = GENERATOR_PARAMS.leval;
    this.documents ??= Array.from({ length: p.documents }, () =>
      this.fresh(this.rng.intBetween(p.documentTokens.min, p.documentTokens.max)),
    );
    return this.documents[this.rng.int(this.documents.length)]!;
  }

  humanevalInstruction(): Segment {
    return (this.instruction ??= this.fresh(GENERATOR_PARAMS.humaneval.instructionTokens));
  }
}

type SingleType = "arxiv" | "leval" | "humaneval";

function draft(type: SingleType, rng: Rng, content: Content): Draft {
  switch (type) {
    case "arxiv": {
      const p = GENERATOR_PARAMS.arxiv;
      const prompt = draw(rng, p.prompt);
      return { promptTokens: prompt, outputTokens: draw(rng, p.output), segments: [content.fresh(prompt)], type };
    }
    case "leval": {
      const p = GENERATOR_PARAMS.leval;
      const doc = content.document();
      const question = content.fresh(rng.intBetween(p.questionTokens.min, p.questionTokens.max));
      return {
        promptTokens: doc.tokens + question.tokens,
        outputTokens: draw(rng, p.output),
        segments: [doc, question],
        type,
      };
    }
    case "humaneval": {
      const p = GENERATOR_PARAMS.humaneval;
      const instruction = content.humanevalInstruction();
      const problem = content.fresh(draw(rng, p.problem));
      return {
        promptTokens: instruction.tokens + problem.tokens,
        outputTokens: draw(rng, p.output),
        segments: [instruction, problem],
        type,
      };
    }
  }
}

/** Single-type and hybrid workloads: independent requests, Poisson arrivals. */
function generateIndependent(
  name: Exclude<GeneratorName, "multiturn">,
  n: number,
  rate: number,
  seed: number,
): Workload {
  const lengthsRng = new Rng(seed, 2);
  const content = new Content(new Rng(seed, 3));
  let types: SingleType[];
  if (name === "hybrid") {
    const thirds: SingleType[] = ["arxiv", "leval", "humaneval"];
    types = new Rng(seed, 4).shuffle(Array.from({ length: n }, (_, i) => thirds[i % 3]!));
  } else {
    types = Array<SingleType>(n).fill(name);
  }
  const arrivals = poissonArrivals(n, rate, new Rng(seed, 1));
  const requests = types.map((type, i): SimRequest => {
    const d = draft(type, lengthsRng, content);
    return {
      id: i,
      arrivalMs: arrivals[i]!,
      promptTokens: d.promptTokens,
      outputTokens: d.outputTokens,
      blocks: segmentBlocks(d.segments, d.promptTokens),
      turn: 1,
      contextTokens: 0,
      type: d.type,
    };
  });
  return finish(name, requests);
}

function generateMultiturn(n: number, rate: number, seed: number): Workload {
  const p = GENERATOR_PARAMS.multiturn;
  const arrivalRng = new Rng(seed, 1),
    rng = new Rng(seed, 2);
  const content = new Content(rng);
  const requests: SimRequest[] = [];
  let start = 0;
  for (let session = 0; requests.length < n; session++) {
    if (session > 0) start += arrivalRng.exponential((1000 * p.turnsMean) / rate);
    const turns = Math.min(p.maxTurns, rng.geometric(p.turnsMean));
    const segments: Segment[] = [];
    let context = 0,
      arrivalMs = start;
    for (let turn = 1; turn <= turns && requests.length < n; turn++) {
      const user = content.fresh(draw(rng, p.user));
      const prompt = context + user.tokens;
      if (prompt > p.maxPromptTokens) break;
      const output = draw(rng, p.assistant);
      segments.push(user);
      requests.push({
        id: 0,
        arrivalMs,
        promptTokens: prompt,
        outputTokens: output,
        blocks: segmentBlocks(segments, prompt),
        session,
        turn,
        contextTokens: context,
        type: "multiturn",
      });
      segments.push(content.fresh(output)); // the reply becomes part of the next turn's prompt
      context = prompt + output;
      arrivalMs += p.ttftMs + p.tpotMs * output + rng.lognormalWithMedian(p.thinkMedianMs, p.thinkSigma);
    }
  }
  return finish("multiturn", requests);
}

/** A seeded synthetic workload (see the table above for what each generator draws). */
export function generate(name: GeneratorName, opts: WorkloadOptions = {}): Workload {
  if (!(GENERATORS as readonly string[]).includes(name)) throw new WorkloadError(msg.unknownGenerator(String(name)));
  const { seed, requests = DEFAULT_REQUESTS, rate = GENERATOR_PARAMS[name].rate } = checkOptions(opts);
  return name === "multiturn"
    ? generateMultiturn(requests, rate, seed)
    : generateIndependent(name, requests, rate, seed);
}

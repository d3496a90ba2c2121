// `dolphin hash`: the chained block hashes of a prompt, one 16-hex-digit hash per full block.

import { loadCoreModule } from "../../bindings/node/index.js";
import { pairsToHex } from "../hashing/hashes.js";
import { HashScheme } from "../generated/abi.js";
import { Router } from "../router/router.js";
import type { HashSchemeName } from "../router/types.js";
import { ruleTable } from "../table/rule-table.js";
import { intOption, readStdin, UsageError, type Command } from "./args.js";

function schemeOption(v: unknown): HashSchemeName {
  if (typeof v === "string" && Object.hasOwn(HashScheme, v)) return v as HashSchemeName;
  throw new UsageError(`--scheme: expected ${Object.keys(HashScheme).join(" or ")}, got ${JSON.stringify(v)}`);
}

export const command: Command = {
  usage: `dolphin hash [--block-size N] [--model M] [--salt S] [--text] [--scheme S [--hash-seed X]] < input

Reads a JSON array of token ids on stdin (or raw UTF-8 text with --text) and prints one chained hash per full
block as 16 lowercase hex digits, token blocks of --block-size ids (default 16), text blocks of 64 bytes. A trailing
partial block is not hashed. --scheme xxh64-chain (the default; h_0 = xxh64(model ‖ "\\0" ‖ salt)) or
llm-d-cbor-fnv (llm-d-kv-cache v0.9.0's token processor: tokens only, seeded by --hash-seed and --model).`,
  options: {
    "block-size": { type: "string" },
    model: { type: "string" },
    salt: { type: "string" },
    text: { type: "boolean" },
    scheme: { type: "string" },
    "hash-seed": { type: "string" },
  },
  async run(v) {
    const blockSize = intOption(v["block-size"], "block-size", 1, 4096, 16);
    const input = readStdin();
    const router = Router.create(ruleTable("always-local"), {
      module: loadCoreModule(),
      workers: [{ id: "w", role: "decode", capacityBlocks: 0 }],
      blockSize,
      maxPromptTokens: Math.max(16, Math.ceil(Buffer.byteLength(input) / 4) + 16),
      indexBlocks: 0,
      ...(v["model"] !== undefined ? { model: String(v["model"]) } : {}),
      ...(v["salt"] !== undefined ? { salt: String(v["salt"]) } : {}),
      ...(v["scheme"] !== undefined ? { hashScheme: schemeOption(v["scheme"]) } : {}),
      ...(v["hash-seed"] !== undefined ? { hashSeed: String(v["hash-seed"]) } : {}),
    });
    let pairs: Uint32Array;
    if (v["text"]) pairs = router.hash({ text: input });
    else {
      let tokens: unknown;
      try {
        tokens = JSON.parse(input);
      } catch (e) {
        throw new UsageError(`stdin: expected a JSON array of token ids: ${(e as Error).message}`);
      }
      if (!Array.isArray(tokens)) throw new UsageError("stdin: expected a JSON array of token ids");
      tokens.forEach((t, i) => {
        if (!Number.isInteger(t) || t < 0 || t > 0xffffffff)
          throw new UsageError(`stdin: token [${i}] is not an integer in 0–4294967295: ${JSON.stringify(t)}`);
      });
      pairs = router.hash({ tokens: tokens as number[] });
    }
    const hex = pairsToHex(pairs);
    if (hex.length) process.stdout.write(hex.join("\n") + "\n");
    return 0;
  },
};

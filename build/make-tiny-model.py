"""The tiny model the real-engine tests serve: a random-weight Llama and a byte-level BPE tokenizer, made locally.

Deterministic: the tokenizer is trained on the Python sources of the pinned vLLM wheel installed beside this
interpreter (sorted, so the same files every time), the weights come from torch.manual_seed(0). No downloads.
Usage: python make-tiny-model.py OUT_DIR   (run by build/vllm-setup.mjs with the vLLM venv's python)
"""
import glob
import importlib.util
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

OUT = sys.argv[1]
VOCAB = 8192
# 4,096 positions: the context the engine tests and the fidelity workloads are scaled to.
CONTEXT = 4096
os.makedirs(OUT, exist_ok=True)

vllm_dir = importlib.util.find_spec("vllm").submodule_search_locations[0]
files = sorted(glob.glob(os.path.join(vllm_dir, "entrypoints", "**", "*.py"), recursive=True))
if not files:
    sys.exit(f"make-tiny-model: no training text under {vllm_dir}/entrypoints")

special = ["<unk>", "<s>", "</s>", "<pad>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
tok = Tokenizer(models.BPE(unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(
    vocab_size=VOCAB,
    special_tokens=special,
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    show_progress=False,
)
tok.train(files, trainer)
bos_id = tok.token_to_id("<s>")
tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos_id)])

hf_tok = PreTrainedTokenizerFast(
    tokenizer_object=tok,
    bos_token="<s>",
    eos_token="</s>",
    unk_token="<unk>",
    pad_token="<pad>",
    additional_special_tokens=["<|system|>", "<|user|>", "<|assistant|>", "<|end|>"],
    model_max_length=CONTEXT,
)
hf_tok.chat_template = (
    "{% for m in messages %}"
    "{{ '<|' + m['role'] + '|>\n' + m['content'] + '<|end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)
hf_tok.save_pretrained(OUT)

torch.manual_seed(0)
cfg = LlamaConfig(
    vocab_size=len(hf_tok),
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=2,
    head_dim=32,
    max_position_embeddings=CONTEXT,
    bos_token_id=hf_tok.bos_token_id,
    eos_token_id=hf_tok.eos_token_id,
    pad_token_id=hf_tok.pad_token_id,
    tie_word_embeddings=False,
    torch_dtype="bfloat16",
)
model = LlamaForCausalLM(cfg).to(torch.bfloat16)
model.save_pretrained(OUT, safe_serialization=True)
print(f"make-tiny-model: {sum(p.numel() for p in model.parameters())} parameters, vocab {len(hf_tok)}, "
      f"tokenizer from {len(files)} files, in {OUT}")

"""model.compile on the device: the compiled decoder's log-probs and gradients against eager, fp32,
SmolLM2-135M's shape (random weights saved once, so both load the same)."""
import sys
import tempfile
import time

import torch
from transformers import AutoConfig, AutoModelForCausalLM

from badpo.engine.logprobs import response_logprobs
from badpo.engine.runtime import load_model
from badpo.engine.settings import LoraSettings, ModelConfig

shape = sys.argv[1]
folder = tempfile.mkdtemp()
torch.manual_seed(0)
AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(shape)).save_pretrained(folder)
dev = torch.device("cuda")
eager = load_model(ModelConfig(name_or_path=folder), LoraSettings(), "no").to(dev)
compiled = load_model(ModelConfig(name_or_path=folder, compile=True), LoraSettings(), "no").to(dev)
g = torch.Generator().manual_seed(1)
print("loaded", flush=True)
for length in (97, 131):
    ids = torch.randint(0, 49000, (8, length), generator=g).to(dev)
    attn = torch.ones_like(ids)
    attn[::2, length - 20:] = 0
    resp = torch.zeros_like(ids, dtype=torch.bool)
    resp[:, 40:] = attn[:, 40:].bool()
    batch = {"input_ids": ids, "attention_mask": attn, "response_mask": resp}
    out = []
    for model in (eager, compiled):
        model.zero_grad(set_to_none=True)
        begin = time.perf_counter()
        lp = response_logprobs(model, batch)
        torch.cuda.synchronize()
        print(f"  forward {time.perf_counter() - begin:.1f} s", flush=True)
        lp.sum().backward()
        torch.cuda.synchronize()
        grads = torch.cat([p.grad.flatten() for p in model.parameters()])
        out.append((lp.detach(), grads, time.perf_counter() - begin))
    (a, ga, ta), (b, gb, tb) = out
    print(f"length {length}: logp max diff {(a - b).abs().max().item():.2e} (scale {a.abs().max().item():.1f}); "
          f"grad max diff {(ga - gb).abs().max().item():.2e} (scale {ga.abs().max().item():.2e}); "
          f"eager {ta:.2f} s, compiled {tb:.2f} s", flush=True)

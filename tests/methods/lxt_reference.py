"""lxt 2.1's AttnLRP relevance of a tiny decoder; run in its own process, since lxt patches transformers' classes.

``python lxt_reference.py NAME IDS_JSON INDEX CONTRAST [DTYPE]`` prints the relevance of each token (JSON) for
logit(INDEX) - logit(CONTRAST) at the last row of the model ``load_model(NAME, DTYPE)`` (float64 by default). Two
points of lxt do not run on transformers 5 and are worked around here, nothing else: importing
``lxt.efficient.models`` imports all of its model files, and its BERT file is a copy of transformers 4's (its ViT
file needs torchvision); and lxt replaces the attention registry with a plain dict, which lacks the
``get_interface`` transformers 5 calls.
"""
import importlib.util
import json
import os
import sys
import types

import torch

from attrbench.models import load_model

name, ids, index, contrast = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
model = load_model(name, sys.argv[5] if len(sys.argv) > 5 else "float64").model
family = {"gemma3_text": "gemma3"}.get(model.config.model_type, model.config.model_type)  # transformers' and lxt's
stub = types.ModuleType("lxt.efficient.models")  # its files, without the __init__ that imports them all
stub.__path__ = [os.path.join(os.path.dirname(importlib.util.find_spec("lxt").origin), "efficient", "models")]
stub.get_default_map = None
sys.modules["lxt.efficient.models"] = stub
from lxt.efficient import monkey_patch  # noqa: E402

hf_module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
registry = hf_module.ALL_ATTENTION_FUNCTIONS
monkey_patch(None, importlib.import_module(f"lxt.efficient.models.{family}").attnLRP)
hf_module.ALL_ATTENTION_FUNCTIONS = registry  # eager attention is the module's patched eager_attention_forward
emb = model.get_input_embeddings()(torch.tensor([ids])).detach().requires_grad_(True)
logits = model(inputs_embeds=emb).logits[0, -1]
(logits[index] - logits[contrast]).backward()
print(json.dumps((emb * emb.grad).sum(-1)[0].tolist()))

"""How much the second residual drowns the FF's update (Kobayashi et al. 2024, §6.1, Fig. 7).

Per layer, the mean L2 norm over tokens of the FF output ``FF(x'_i)`` and of the vector the second
residual carries around it (``x'_i``), read from the real forward pass: the residual's output
minus the FF output. The paper found the bypass more than twice the FF output in most layers.
"""
import numpy as np
from tqdm.auto import tqdm

from attrbench.plugin import Analysis, register
from attrbench.plugin.internal import layout_for, safe_divide


class ResFFNorms(Analysis):
    name = "res_ff_norms"
    description = "mean norm of the FF output vs the RES2 bypass, per layer"
    reference = "Kobayashi et al. 2024, §6.1"

    def run(self, adapter, methods, examples, context):
        layout = layout_for(adapter.norm_first)
        res2_out = layout.boundary(layout.after_res2)  # the captured tensor RES2 outputs
        ff, bypass = [], []
        for example in tqdm(examples, desc=self.name, unit="ex", disable=not context.progress, leave=False):
            captures = adapter.capture(adapter.encode([example.text]))
            ff.append([float(c.ff_out[0].norm(dim=-1).mean()) for c in captures])
            bypass.append([float((getattr(c, res2_out)[0] - c.ff_out[0]).norm(dim=-1).mean()) for c in captures])
        ff, bypass = np.array(ff), np.array(bypass)
        ratio = safe_divide(bypass, ff)
        return [self.record(adapter, context, "-", metric, values.mean(1).tolist(), examples,
                            per_layer=values.mean(0).tolist())
                for metric, values in (("ff_norm", ff), ("bypass_norm", bypass), ("bypass_to_ff_ratio", ratio))]


register(ResFFNorms)

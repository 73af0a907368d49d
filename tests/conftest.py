"""Suite-wide set-up."""
import os

import torch

# Triton's interpreter runs the THC kernels (worker/codecs/thc_triton.py) on CPU tensors. It has to
# be on before Triton compiles them (at the module's first import, which the codec defers), and
# only where there is no GPU: there the kernels run for real.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

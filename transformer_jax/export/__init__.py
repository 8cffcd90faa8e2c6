"""Exporting a trained model to another inference engine: CTranslate2 (ctranslate2.py: the mapping; exported.py: the
exported folder and its record).

Nothing heavy is imported here: launch/flags.py reads the choices below without JAX.
"""

ENGINES = ("jax", "ctranslate2")  # decode|evaluate --engine: this library's beam search, or an exported model
# --quantization: how the weights are stored ("none": float32, as trained). CTranslate2 computes int8 matrices with
# float32 elsewhere on a CPU ("int8" and "int8_float32" are then the same), float16 on a GPU.
QUANTIZATIONS = ("none", "int8", "int8_float32", "float16")

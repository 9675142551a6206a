"""The maths on arrays and tensors: intake and fitting, patches and their cost, position embeddings, attention maps,
Swin windows, and a small thread-safe cache. Nothing here loads or runs a model."""

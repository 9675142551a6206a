"""What exists before anything runs: the model registry, the standard ViT sizes and every view's declared settings.

Pure data: nothing here imports torch, numpy or matplotlib (the command line answers --help from it alone).
"""

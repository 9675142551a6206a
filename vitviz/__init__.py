"""vitviz: the maths, model hooking and plotting behind the vitviz app.

Modules, one idea each: ``images`` (intake), ``patches`` (tokens and cost), ``posembed``
(position embeddings), ``models`` (registry and loading), ``attention`` (recording and
analysis), ``classify``, ``plotting``, ``scenes`` / ``train`` / ``quality`` (the embedded
model). ``views`` composes them into what each tab shows. Nothing here imports gradio.
"""

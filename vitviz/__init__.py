"""vitviz: how a Vision Transformer sees an image, as a library, a command line and a Gradio app.

The sub-packages are floors: each imports only from the floors below it (``tests/test_layers.py`` checks).

    assets     the shipped files: example pictures, the embedded model, the theme (paths only)
    specs      what exists: the model registry and standard sizes, every view's declared settings (pure data)
    core       the maths on arrays: intake and fitting, patches and their cost, position embeddings,
               attention maps (rollout, mass threshold, boxes), Swin windows, a thread-safe cache
    models     hooks, loading (hub, local cache, the embedded files), the Runner that owns a model and runs
               every forward, the one cache of loaded models, the memory budget
    analyses   what one forward is asked to record: attention, one head taken apart, token streams,
               class relevance, classification and its experiments
    embedded   the offline model vitviz trains itself: generated scenes, training, quality
    render     figures (matplotlib Figure objects and PIL), the browser views' payloads and scripts
    views      what each view shows, from its declared settings to figures and text
    tools      a view as files (bundles) and the ``vitviz`` command
    app        the Gradio app, one module per tab: the only place that imports gradio
"""

import pkgutil

__path__ = pkgutil.extend_path(__path__, __name__)  # a vitviz/views or vitviz/app folder elsewhere on the path
# adds views and tabs (each found by its package's discovery); vitviz's own modules come first

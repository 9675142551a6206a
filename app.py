"""vitviz on a Hugging Face Space (or ``python app.py``): the app itself lives in the package, in vitviz/app/."""

from vitviz.app import build_demo, launch_kwargs, main  # noqa: F401  (build_demo, launch_kwargs: for scripts)


def __getattr__(name: str):
    """``app.demo``, built on first use: what ``gradio app.py`` (reload mode) looks for; importing stays light."""
    if name == "demo":
        globals()["demo"] = built = build_demo()
        return built
    raise AttributeError(name)


if __name__ == "__main__":
    main()  # its arguments: python app.py --models FILE --port N

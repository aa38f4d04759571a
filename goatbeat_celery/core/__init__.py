"""The scheduling core, standard library only (a test enforces it), in layers that import only
downwards: ``types`` (the data it reasons about) and ``rules`` (pure rules, each written once),
``protocols`` (what the stores and the submitter implement), and ``loop`` (the engine that
applies the rules through the protocols)."""

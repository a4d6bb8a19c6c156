"""The pure pieces, torch and numpy only: losses, the bias channel, declared attributes, the
judgment row and the name pool, typed config and JSON. Nothing here loads a model or a dataset."""

"""The offline validator: a recorded transcript read through the model and judged by the
registered rules."""

"""The task models: fine-tuned here on the shipped data (``tasks``)."""

"""Built-in evaluation plugins (installed as ``attrbench.evals``); none are registered yet."""

"""Shapley-value split of the FF activation (Kobayashi et al. 2024, App. E); see ``engines`` for the engines."""
from .engines import MAX_EXACT_PLAYERS, check_players, exact, exact_dense, sampling, with_shap
from .weights import shapley_weights

__all__ = ["exact", "exact_dense", "sampling", "with_shap", "check_players", "shapley_weights", "MAX_EXACT_PLAYERS"]

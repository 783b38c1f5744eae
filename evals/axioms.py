"""Axioms: whether each attribution meets the identity its method claims, per example.

A method that declares an ``axiom`` (``attrbench.plugin.internal.AXIOMS``: IG's completeness, Shapley efficiency,
LRP / DeepLIFT conservation) records in every result the relative residual |attributed − expected| /
|expected| of that identity and its tolerance (``meta["axiom"]``, :func:`attrbench.plugin.axiom_check`). This
evaluation reads them: per example the ``residual`` and ``passes`` (1.0 within the tolerance, 0.0 not), so the
report can show beside a method's scores the share of examples on which its output is what the method
promises (Sundararajan et al. 2017 ask for IG's gap to be checked on every input), and name the method × suite
cells where that share is below ``check_share``: there the scores are not what the method defines, and their rank
is no verdict on it. It computes nothing: no model output, only what the attribution recorded. A method with no
axiom is not taken (``takes``), so a run gives it no row here rather than a row of "not applicable"; an
attribution cached before its method recorded the axiom gives undefined values (None).
"""
from attrbench.plugin import METHODS, Evaluation, InputError, register
from attrbench.plugin.internal import AXIOMS


class Axioms(Evaluation):
    name, family = "axioms", "checks"
    description = "per example, the residual of the identity a method claims (completeness, efficiency, conservation)"
    reference = "Sundararajan et al. 2017; Lundberg & Lee 2017; Bach et al. 2015; Shrikumar et al. 2017"
    ranked = False
    primary_metric = "passes"
    higher_is_better = {"passes": True, "residual": False}
    bounds = {"passes": (0.0, 1.0), "residual": (0.0, None)}
    record_fields = ("axiom", "tolerance")
    check_share = 0.95  # a cell passes where 95 % of its examples meet the axiom (IG: relative gap ≤ 0.05 on ≥ 95 %)

    def takes(self, method) -> bool:
        return super().takes(method) and getattr(method, "axiom", None) in AXIOMS

    def check(self, adapter, methods, context) -> None:
        claiming = ", ".join(m.name for m in METHODS.all() if self.takes(m))
        for method in methods:
            if super().takes(method) and not self.takes(method):
                raise InputError(f"method '{method.name}' claims no axiom, so 'axioms' has nothing to check; "
                                 f"methods that claim one: {claiming}")
        if not methods:
            raise InputError(f"'axioms' checks methods that claim an axiom and got none; give one of {claiming}")
        super().check(adapter, methods, context)

    def score(self, work, result):
        recorded = result.meta.get("axiom")
        if not isinstance(recorded, dict):  # an attribution stored before its method recorded the axiom
            return {"passes": None, "residual": None, "axiom": None, "tolerance": None}
        return {"passes": 1.0 if recorded["passes"] else 0.0, "residual": recorded["residual"],
                "axiom": recorded["name"], "tolerance": recorded["tolerance"]}


register(Axioms)

"""Which form of a plan holds the budget, said once: the first statement of every plan report, the one form it
recommends (never one that does not fit), and `gpulint plan`'s exit code (1 when no form meets the budget).

Torch-free and reading plain figures, so that the planner's reports and the bot's (which keeps its own plan reader)
say the same thing in the same words.

    v = Verdict(budget_bytes=200 * 2**20, unit="MiB", forms=[Form("eager", "gpulint.apply", 199 * 2**20, True), ...])
    v.statement()     # "Budget 200.00 MiB: eager (`gpulint.apply`) fits at 199.00 MiB; compiled (...) does NOT fit ..."
    v.advice()        # "Apply the eager form: `gpulint.apply(model, plan)`."
    v.met             # False only when a budget was given and no form fits it
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpulint.units import format_bytes

HOW_TO_APPLY = {
    "eager": "`gpulint.apply(model, plan)`",
    "compiled": "`gpulint.planner.compile(model, plan)` (or `torch.compile` with `gpulint_backend`)",
}


@dataclass(frozen=True)
class Form:
    """One form of the plan: its name (`eager`, `compiled`), the API that applies it, its planned peak."""

    name: str
    api: str
    peak_bytes: float | None  # None: the form could not be planned (`error` says why)
    fits: bool
    error: str | None = None

    @property
    def label(self) -> str:
        return f"{self.name} (`{self.api}`)"


@dataclass(frozen=True)
class Verdict:
    budget_bytes: float | None
    unit: str  # the unit figures are shown in (units.display_unit)
    forms: list[Form] = field(default_factory=list)  # in the order of preference: eager first
    lowest_peak_bytes: float | None = None  # the lowest peak recomputation reaches (compiled form)

    @property
    def met(self) -> bool:
        return self.budget_bytes is None or any(f.fits for f in self.forms)

    @property
    def recommended(self) -> Form | None:
        """The first form (eager before compiled) that fits; with no budget, the first that could be planned."""
        return next((f for f in self.forms if f.error is None and (f.fits or self.budget_bytes is None)), None)

    @classmethod
    def of(cls, budget_bytes: float | None, unit: str, *, compiled_peak: float, compiled_fits: bool,
           lowest_peak_bytes: float | None = None, eager: tuple[float, bool, str | None] | None = None) -> Verdict:
        """From a plan's figures: the compiled form's peak and whether it fits, and the eager form's (peak, fits,
        error) when the plan has one. Eager comes first: it is the form to prefer when both fit."""
        forms = []
        if eager is not None:
            peak, fits, error = eager
            forms.append(Form("eager", "gpulint.apply", None if error else peak, fits=error is None and fits,
                              error=error))
        forms.append(Form("compiled", "gpulint.planner.compile", compiled_peak, fits=compiled_fits))
        return cls(budget_bytes, unit, forms, lowest_peak_bytes)

    def _bytes(self, n: float | None) -> str:
        return format_bytes(n, self.unit)

    def statement(self) -> str:
        planned = [f for f in self.forms if f.error is None]
        failed = "".join(f"; {f.label} could not be planned" for f in self.forms if f.error is not None)
        if self.budget_bytes is None:
            peaks = ", ".join(f"{f.label} {self._bytes(f.peak_bytes)}" for f in planned)
            return f"No budget: each form recomputes down to its lowest peak: {peaks}{failed}."
        head = f"Budget {self._bytes(self.budget_bytes)}"
        if not any(f.fits for f in planned):
            peaks = ", ".join(f"{f.label} peaks at {self._bytes(f.peak_bytes)}" for f in planned)
            lowest = (f" (the lowest peak recomputation reaches is {self._bytes(self.lowest_peak_bytes)})"
                      if self.lowest_peak_bytes is not None else "")
            return f"{head} is NOT met: no form fits: {peaks}{lowest}{failed}."
        if all(f.fits for f in planned) and len(planned) > 1:
            peaks = ", ".join(f"{f.label} at {self._bytes(f.peak_bytes)}" for f in planned)
            return f"{head}: both forms fit: {peaks}{failed}."
        parts = [f"{f.label} fits at {self._bytes(f.peak_bytes)}" if f.fits else
                 f"{f.label} does NOT fit: it peaks at {self._bytes(f.peak_bytes)}" for f in planned]
        return f"{head}: " + "; ".join(parts) + f"{failed}."

    def advice(self) -> str:
        form = self.recommended
        if form is not None:
            return f"Apply the {form.name} form: {HOW_TO_APPLY.get(form.name, f'`{form.api}`')}."
        if self.budget_bytes is None:
            return "No form could be planned."
        return ("No form to apply: raise the budget, or lower what the step holds (a smaller batch, a lower "
                "precision, an optimizer with less state).")

"""GPL407 distribution-validation-in-step."""

from __future__ import annotations

import re

import libcst as cst

from gpulint.linter.devices import DeviceEvidence
from gpulint.linter.names import dotted_name
from gpulint.linter.rule import Invalid, Replace, RuleDocs
from gpulint.linter.syntax import descendants
from gpulint.rules.common import is_false, keyword_arg
from gpulint.rules.examples import training_script
from gpulint.rules.sync.helpers import SyncRule, known_false_positives

# The distributions of `torch.distributions` (PyTorch 2.x). Each checks its arguments against its constraints when
# it is built (`if not valid.all(): raise ValueError`), and the value given to `log_prob` when it scores one. Not the
# wrappers `Independent`, `TransformedDistribution` and `MixtureSameFamily`: they have no argument constraints, so
# building one checks nothing (what they wrap checks its own).
_DISTRIBUTIONS = frozenset(
    {
        "Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2", "ContinuousBernoulli", "Dirichlet",
        "Exponential", "FisherSnedecor", "Gamma", "GeneralizedPareto", "Geometric", "Gumbel", "HalfCauchy",
        "HalfNormal", "InverseGamma", "Kumaraswamy", "LKJCholesky", "Laplace", "LogNormal",
        "LogisticNormal", "LowRankMultivariateNormal", "Multinomial", "MultivariateNormal",
        "NegativeBinomial", "Normal", "OneHotCategorical", "OneHotCategoricalStraightThrough", "Pareto", "Poisson",
        "RelaxedBernoulli", "RelaxedOneHotCategorical", "StudentT", "Uniform", "VonMises",
        "Weibull", "Wishart",
    }
)
_NAMES_A_DISTRIBUTION = re.compile(r"\b(%s)\s*\(" % "|".join(sorted(_DISTRIBUTIONS)))


def _flow_with_prior(prior: str) -> str:
    """A flow whose loss scores its output under a prior built once in `__init__`."""
    return ("import torch\nfrom torch.distributions import Normal\n\n\nclass Flow(torch.nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n        self.net = torch.nn.Linear(4, 4)\n"
            f"        self.prior = {prior}\n\n    def forward(self, x):\n        prior = self.prior\n"
            "        return -prior.log_prob(self.net(x)).mean()\n\n\n"
            "def train(model, loader, opt):\n    for x in loader:\n"
            "        model(x.cuda(non_blocking=True)).backward()\n        opt.step()\n")


def _policy_scoring_actions(validation: str = "") -> str:
    """A policy whose distribution one method builds and another scores (walk-these-ways' actor-critic)."""
    return ("import torch\nfrom torch.distributions import Normal\n\n\n"
            "class Policy:\n"
            "    def __init__(self, actor):\n        self.actor = actor\n\n"
            "    def update_distribution(self, obs):\n"
            "        mean = self.actor(obs)\n"
            f"        self.distribution = Normal(mean, mean * 0.0 + 1.0{validation})\n\n"
            "    def actions_log_prob(self, actions):\n"
            "        return self.distribution.log_prob(actions).sum(dim=-1)\n\n\n"
            "def train(model, loader, optimizer, device):\n"
            "    policy = Policy(model)\n"
            "    for obs, labels in loader:\n"
            "        policy.update_distribution(obs.cuda(non_blocking=True))\n"
            "        actions = torch.nn.functional.one_hot(labels, 4).float().cuda(non_blocking=True)\n"
            "        loss = -policy.actions_log_prob(actions).mean()\n"
            "        optimizer.zero_grad()\n        loss.backward()\n        optimizer.step()\n")


class DistributionValidationInStep(SyncRule):
    code = "GPL407"
    name = "distribution-validation-in-step"
    message = (
        "`{name}(...)` validates its arguments on the host (`if not valid.all()`): a device-to-host sync each time "
        "it is built, and again in `log_prob`; pass `validate_args=False`"
    )
    triggers = ("distributions",)
    facts = ("set_default_validate_args",)  # read wherever it is in the file (the project model reads other files)
    fixable = True
    docs = RuleDocs(
        what_it_does="Flags a `torch.distributions` distribution (`Normal`, `Categorical`, `Bernoulli`, ...) built "
        "in code that runs every training step without `validate_args=False`, and `log_prob` (or `cdf`) of a value "
        "not on the host scored in the step under such a distribution that a name or an attribute holds "
        "(`normal = Normal(mu, std)`; `self.prior = Normal(0, 1)`, built once, or `self.distribution = Normal(mu, "
        "std)` in another method: each validates every value it scores), in a file that names a device, in a "
        "project no file of which (tests aside) turns validation off with "
        "`Distribution.set_default_validate_args(False)`, and whose scripts and README do not run every training "
        "file with `python -O` (TWM's `python -O twm/main.py`, under which validation is off by default).",
        why_slow="With validation on (PyTorch's default unless Python runs with `-O`), the constructor checks every "
        "parameter against its constraint and branches on the result in Python (`if not valid.all(): raise`), which "
        "copies a boolean from the device and waits for the GPU; `log_prob` checks its value the same way. A policy "
        "or VAE step pays one sync per parameter of each distribution it builds.",
        example="for x, y in loader:\n    mu, log_std = policy(x)\n"
        "    dist = torch.distributions.Normal(mu, log_std.exp())\n    loss = -dist.log_prob(y).mean()",
        use_instead="`Normal(mu, std, validate_args=False)`, or "
        "`torch.distributions.Distribution.set_default_validate_args(False)` once at start-up (keep validation on in "
        "tests, where a bad parameter should fail loudly).",
        fix_safety="Unsafe: the fix adds `validate_args=False`. Valid parameters give the same values; invalid ones "
        "(a negative scale, probabilities that do not sum to one) no longer raise, they give NaN or wrong samples.",
        false_positives=known_false_positives("Not reported in a file that shows no sign of a GPU (no device, "
        "`.cuda()`, accelerator or distributed package): its distributions may well live on the CPU; nor for a "
        "distribution of Python numbers or of scalar hyper-parameters by name (mixup's `Beta(alpha, alpha)`), which "
        "validates on the host. A project that turns validation off where the text does not say so (a config "
        "read at run time), or runs with `python -O`: add `validate_args=False` where the step builds them, or "
        "`# noqa: GPL407`. (Checked one file at a time, without the project model, a call in another file is not "
        "seen.)"),
    )
    valid = (
        _flow_with_prior("Normal(0.0, 1.0, validate_args=False)"),
        training_script("dist = torch.distributions.Normal(out, torch.ones_like(out), validate_args=False)\n"
                        "total += 0.0 * dist.log_prob(out).sum().detach()"),
        training_script("dist = Categorical(logits=out)\nentropy = dist.entropy().mean()",
                        header="from torch.distributions import Categorical\n\n"
                        "torch.distributions.Distribution.set_default_validate_args(False)"),
        training_script("if step % 100 == 0:\n    dist = torch.distributions.Categorical(logits=out)\n"
                        "    entropy = dist.entropy().mean()"),
        training_script("alpha = 0.4\nlam = torch.distributions.Beta(alpha, alpha).sample().to(device)\n"
                        "mixed = lam * out"),
    )
    invalid = (
        # a prior of host numbers built once: scoring a device value validates it (GenerSpeech's post-flow prior)
        Invalid(_flow_with_prior("Normal(0.0, 1.0)")),
        # a policy's distribution built by one method and scored by another (walk-these-ways' actor-critic): the
        # constructor and `log_prob` each sync
        Invalid(_policy_scoring_actions(), count=2, fixed=_policy_scoring_actions(", validate_args=False")),
        Invalid(training_script("dist = torch.distributions.Categorical(logits=out)\nentropy = dist.entropy().mean()"),
                fixed=training_script("dist = torch.distributions.Categorical(logits=out, validate_args=False)\n"
                                      "entropy = dist.entropy().mean()")),
        # the constructor checks its parameters, and `log_prob` checks the value: two syncs, one fix
        Invalid(training_script("prior = Normal(torch.zeros_like(out), torch.ones_like(out))\n"
                                "kl = prior.log_prob(out.detach()).mean()",
                                header="from torch.distributions import Normal"), count=2,
                fixed=training_script("prior = Normal(torch.zeros_like(out), torch.ones_like(out), "
                                      "validate_args=False)\nkl = prior.log_prob(out.detach()).mean()",
                                      header="from torch.distributions import Normal")),
        Invalid(training_script("pi = D.Independent(D.Normal(out, out.exp()), 1)",
                                header="import torch.distributions as D"),
                fixed=training_script("pi = D.Independent(D.Normal(out, out.exp(), validate_args=False), 1)",
                                      header="import torch.distributions as D")),  # the wrapper checks nothing
    )

    @classmethod
    def may_report_in(cls, code: str, name: str, class_name: str) -> bool:
        return bool(_NAMES_A_DISTRIBUTION.search(code)) or ".log_prob(" in code or ".cdf(" in code

    def __init__(self, context) -> None:
        super().__init__(context)
        self._validation_off = False
        # `self.prior = Normal(0, 1)` (in any method): attributes holding a distribution of host numbers that
        # validates, and the names a function binds to one (`prior = self.prior`)
        self._validating_attributes: set[str] | None = None  # read at the first `log_prob` (imports known by then)
        self._bound: dict[int, set[str]] = {}

    def _attributes(self) -> set[str]:
        if self._validating_attributes is None:
            text = self.context.text
            # (the walk of the module only where something scores with `log_prob`)
            self._validating_attributes = _validating_attributes(self.context.module, self.context) \
                if text is None or ".log_prob(" in text or ".cdf(" in text else set()
        return self._validating_attributes

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            return
        # `prior = self.prior`, or `normal = Normal(mean, std)`: a name the function binds to a validating one
        if isinstance(node.value, cst.Attribute) and (dotted_name(node.value) or "") in self._attributes() \
                or isinstance(node.value, cst.Call) and _validating_distribution(node.value, self.context):
            self._bound.setdefault(id(self.context.enclosing_function()), set()).add(node.targets[0].target.value)

    def visit_Call(self, node: cst.Call) -> None:
        if self._scores_a_device_value(node):
            self.report(node, _LOG_PROB_MESSAGE)
            return
        resolved = self.context.resolve(node.func) or ""
        module, _, name = resolved.rpartition(".")
        if name == "set_default_validate_args" and node.args and is_false(node.args[0].value):
            self._validation_off = True
            return
        if not _builds_validating(node, self.context):
            return
        if node.args and all(self._host_parameter(a.value) for a in node.args):
            return  # `Beta(alpha, alpha)` of Python floats: it validates on the host, with nothing to wait for
        fix = (Replace(node, node.with_changes(args=(*_with_comma(node.args), _NO_VALIDATION))),) if node.args else ()
        self.report(node, self.message.format(name=name), fix=fix, unsafe_fix=True)

    def _scores_a_device_value(self, call: cst.Call) -> bool:
        """`prior.log_prob(z)` (or `cdf`) of a validating distribution a name or an attribute holds: of host numbers
        built once (`self.prior = Normal(0, 1)`), where building it checked nothing on the device, or built in the
        step (`normal = Normal(mean, std)`, `self.distribution = Normal(...)` in another method), which checked its
        parameters: scoring `z` validates `z` there, one more sync."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in _VALIDATING_METHODS and call.args):
            return False
        receiver = dotted_name(func.value) or ""
        bound = self._bound.get(id(self.context.enclosing_function()), set())
        return (receiver in self._attributes() or receiver in bound) \
            and not self.context.is_host_value(call.args[0].value)

    def _host_parameter(self, expr: cst.BaseExpression) -> bool:
        """A host value, or a name (or attribute) that only names a scalar hyper-parameter (`beta`, `self.alpha`)."""
        if self.context.is_host_value(expr):
            return True
        name = expr.attr.value if isinstance(expr, cst.Attribute) else expr.value if isinstance(expr, cst.Name) else ""
        return name in _SCALAR_PARAMETER_NAMES

    def leave_Module(self, node: cst.Module) -> None:
        # Wherever the file or another file of the project (pydreamer's `train.py`) turns validation off, no
        # distribution validates; and in a file that shows no sign of a GPU (Spinning Up's policies run on the CPU),
        # the check reads host memory: no sync, unless the project names a device and hands the file its tensors
        # (IQL's `policy.py`, imported by its training).
        shows_gpu = self.context.helper(DeviceEvidence).shows_gpu(self.context) or self.context.facts.device_fed
        if self._validation_off or self.context.facts.validation_off or not shows_gpu:
            self.context.reports[:] = [r for r in self.context.reports if r.rule is not self]


_LOG_PROB_MESSAGE = (
    "`log_prob` of a distribution built with validation on checks its value on the host (`if not valid.all()`): a "
    "device-to-host sync every step; build the distribution with `validate_args=False`"
)


def _validating_attributes(module: cst.Module, context) -> set[str]:
    """The `self.` attributes any method sets to a validating `torch.distributions` distribution (GenerSpeech's
    `self.prior_dist = dist.Normal(0, 1)` in `__init__`, walk-these-ways' `self.distribution = Normal(mean, std)`)."""
    found: set[str] = set()
    for node in descendants(module):
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.value, cst.Call) \
                and (dotted_name(node.targets[0].target) or "").startswith("self.") \
                and _validating_distribution(node.value, context):
            found.add(dotted_name(node.targets[0].target) or "")
    return found


def _builds_validating(call: cst.Call, context) -> bool:
    """A `torch.distributions` distribution built without `validate_args`, and no `**kwargs` that may hold it (the
    choice made explicitly either way): it validates its parameters and each value it scores."""
    module_name, _, name = (context.resolve(call.func) or "").rpartition(".")
    return name in _DISTRIBUTIONS and module_name.startswith("torch.distributions") \
        and keyword_arg(call, "validate_args") is None and not any(a.star == "**" for a in call.args)


def _validating_distribution(call: cst.Call, context) -> bool:
    """A validating distribution built with parameters (`_builds_validating`), or `Independent` of one: its
    `log_prob` validates the value it scores."""
    module_name, _, name = (context.resolve(call.func) or "").rpartition(".")
    if name == "Independent" and module_name.startswith("torch.distributions") \
            and call.args and isinstance(call.args[0].value, cst.Call):
        return _validating_distribution(call.args[0].value, context)
    return bool(call.args) and _builds_validating(call, context)


# The methods that check the value they are given against the support (`_validate_sample`).
_VALIDATING_METHODS = frozenset({"log_prob", "cdf"})


# Names that hold a distribution's scalar hyper-parameters (mixup's `Beta(alpha, alpha)`), not tensors.
_SCALAR_PARAMETER_NAMES = frozenset({"alpha", "beta", "concentration", "concentration0", "concentration1"})

_NO_VALIDATION = cst.Arg(keyword=cst.Name("validate_args"), value=cst.Name("False"),
                         equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))


def _with_comma(args) -> list[cst.Arg]:
    """The arguments with a comma after the last one, so that one more can follow."""
    args = list(args)
    if args and args[-1].comma is cst.MaybeSentinel.DEFAULT:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return args

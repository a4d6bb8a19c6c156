"""theta's whole life in one place: where it starts (:mod:`~badpo.theta.start`), what it does after
the start (:mod:`~badpo.theta.level`: the rules of ``bias.level`` and the trusted level step), its
own optimiser and step (:mod:`~badpo.theta.step`), the labels its rules read
(:mod:`~badpo.theta.labels`), its parts in a checkpoint (:mod:`~badpo.theta.state`), and its
options checked once, in the words of the front door that called (:mod:`~badpo.theta.options`).
The channel itself, a pure ``nn.Module``, is :class:`badpo.core.bias.BiasChannel`. ``badpo
train``/``rm`` and :class:`BADPOTrainer` call the same functions at the same points: the start
before training, the gradient reduction and the step after each optimizer step of the policy, the
level step after it, ``theta.json`` at the end."""

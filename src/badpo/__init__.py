"""badpo: bias-adjusted preference optimization (BA-DPO).

DPO treats every preference label as a measurement of quality, so a bias that all annotators
share is absorbed by the policy. BA-DPO adds a learned bias per annotator on a declared
attribute to the DPO logit, ``-log sigmoid(u + theta_k . (g(y_w) - g(y_l)))``, so that the bias
is explained by theta and not learned by the policy.
"""

__version__ = "0.1.0"

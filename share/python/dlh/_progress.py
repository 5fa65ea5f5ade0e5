"""The progress channel, through dlh_progress (share/python/dlh_progress.py, beside this
package): one writer of the protocol, whichever module a program imports."""

import os
import sys

try:
    import dlh_progress as _p
except ImportError:  # the package's folder on sys.path without its parent's modules
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import dlh_progress as _p

step = _p.step
evaluation = _p.evaluation
checkpoint_saved = _p.checkpoint
resumed = _p.resumed
stopping = _p.stopping
describe = _p.describe
describe_model = _p.describe_model
reporting = _p.enabled

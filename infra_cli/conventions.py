"""Names more than one floor relies on, kept in one neutral place (floor 0).

- The ownership tags infra writes on every resource it creates. Live state is the only state: plan finds what
  a stack owns by these tags, and never touches a resource without them.
- The variable the local emulator sets on the processes of an emulated node: the smoke script reads it to
  judge a CPU run on one machine as what it is (no GPUs, no InfiniBand to prove); and the log in which the
  emulator names what of a job's outputs it left out, which the smoke reports.
- The prefix of the cloud names the emulator registers with azure-ai-ml, which the program's entry drops when a
  child process inherits one (before any import: --help stays light).
"""

import os

TAG_STACK = "infra.stack"
TAG_ADDRESS = "infra.address"
TAG_HASH = "infra.hash"
TAG_SECRETS = "infra.secrets-hash"
TAG_PREVENT_DESTROY = "infra.prevent-destroy"
OWNERSHIP_TAGS = (TAG_STACK, TAG_ADDRESS, TAG_HASH, TAG_SECRETS, TAG_PREVENT_DESTROY)

EMULATED_NODE_VARIABLE = "INFRA_EMULATED_NODE"
# The log in which the emulator names what of a job's outputs/ it did not upload (a link, a file over its bound),
# and from which the smoke reports it: one line each, beside the job's other system logs
OUTPUTS_LEFT_OUT_LOG = "system_logs/outputs_left_out.txt"

EMULATOR_CLOUD_PREFIX = "InfraLocalEmulator"


def forget_inherited_emulator_cloud() -> None:
    """MLClient records its cloud in AZUREML_CURRENT_CLOUD, and azure.ai.ml reads it at import time. One naming
    another process's emulator cloud (inherited by a child process) makes that import fail with "Unknown cloud
    environment"; such a name means nothing outside the process that registered it, so drop it first."""
    if os.environ.get("AZUREML_CURRENT_CLOUD", "").startswith(EMULATOR_CLOUD_PREFIX):
        del os.environ["AZUREML_CURRENT_CLOUD"]

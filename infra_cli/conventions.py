"""Names more than one floor relies on, kept in one neutral place (floor 0).

- The ownership tags infra writes on every resource it creates. Live state is the only state: plan finds what
  a stack owns by these tags, and never touches a resource without them.
- The variable the local emulator sets on the processes of an emulated node: the smoke script reads it to
  judge a CPU run on one machine as what it is (no GPUs, no InfiniBand to prove).
"""

TAG_STACK = "infra.stack"
TAG_ADDRESS = "infra.address"
TAG_HASH = "infra.hash"
TAG_SECRETS = "infra.secrets-hash"
TAG_PREVENT_DESTROY = "infra.prevent-destroy"
OWNERSHIP_TAGS = (TAG_STACK, TAG_ADDRESS, TAG_HASH, TAG_SECRETS, TAG_PREVENT_DESTROY)

EMULATED_NODE_VARIABLE = "INFRA_EMULATED_NODE"

"""The embedded policy: a small pointer-generator transformer that runs on 2 CPU cores.

Importing this package registers the model with transformers' Auto classes, so
`AutoConfig.from_pretrained(dir)` and `AutoModelForCausalLM.from_pretrained(dir)` load a checkpoint
directory (config.json + model.safetensors) once `workers.policy.embedded` has been imported.
"""

from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

from workers.policy.embedded.configuration import FlywheelPolicyConfig
from workers.policy.embedded.modeling import FlywheelPolicyModel
from workers.policy.embedded.tokenizer import FlywheelTokenizer

AutoConfig.register(FlywheelPolicyConfig.model_type, FlywheelPolicyConfig, exist_ok=True)
AutoModel.register(FlywheelPolicyConfig, FlywheelPolicyModel, exist_ok=True)
AutoModelForCausalLM.register(FlywheelPolicyConfig, FlywheelPolicyModel, exist_ok=True)

__all__ = ["FlywheelPolicyConfig", "FlywheelPolicyModel", "FlywheelTokenizer"]

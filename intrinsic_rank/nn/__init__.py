"""Torch modules: the ladder's students (B0-B3), Min-IP heads and prompted causal LMs.

Rooms of this package:

* model loading (``_loading``; the package's own ``.pt`` files and embedded
  model in ``_tiny_files``): :func:`load_model` resolves whatever names a
  model -- ``"default"``, a packaged name, a ``.pt`` file, a Hugging Face
  folder, an instance or an adapter -- and :func:`as_causal_lm` /
  :func:`as_model_adapter` wrap the result for reachability and geometry;
  :func:`model_digest` (``_digest``) says which model it is by its content;
* causal LMs and adapters (``_causal_lm``, ``_hf``), prompted LMs
  (``_prompted``) and their training (``_lm_training``);
* the one reader of attention heads, a table of model families
  (``_families``, the projections of each layout in ``_family_readers``), with the
  static per-head weights built on it (``_heads``), a head's arithmetic shared by
  its recomputation and its students (``_head_math``), and realised attention
  maps (``_attention_maps``);
* the rank-batched students (``_students``, ``_kernel_students``,
  ``_registry``), and the rotary softmax student of real rotary heads
  (``_rotary_students``) with its distillation from a real head
  (``_distillation``); normalised kernel attention and heads with fixed maps
  (``_kernel_attention``) and the Min-IP paper's exact heads
  (``_min_ip_constructions``);
* kernel feature maps equal to their published definitions
  (``_feature_maps``), and the Min-IP rank law's head and trainer
  (``_triple_heads``, ``_triple_training``).
"""

from ._causal_lm import (
    CausalLMAdapter,
    TinyCausalLM,
    TinyLMAdapter,
    check_causal,
    greedy_decode,
)
from ._head_math import (
    ROPE_LAYOUTS,
    HeadNorm,
    rope_frequencies,
    rope_tables,
    rotate,
    soft_cap,
    visible_keys,
)
from ._families import HEAD_FAMILIES, AttentionLayer, HeadFamily, attention_layers, unwrap_model
from ._heads import QueryKeyHeads, query_key_weights, value_weights
from ._attention_maps import (
    attention_maps,
    check_token_inputs,
    model_max_positions,
    model_vocab_size,
)
from ._hf import (
    HFCausalLMAdapter,
    HFEncoderAdapter,
    load_gguf_causal_lm,
    load_gguf_tokenizer,
    load_hf_causal_lm,
    load_hf_model,
    load_hf_tokenizer,
)
from ._feature_maps import (
    FEATURE_MAPS,
    elu_plus_one_features,
    exp_features,
    favor_features,
    gaussian_projection,
    hedgehog_features,
    relu_features,
    taylor_feature_count,
    taylor_features,
)
from ._kernel_attention import DenseSoftmaxHead, NormalizedKernelHead, normalized_kernel_attention
from ._kernel_students import KERNEL_STUDENT_MAPS, DenseAttentionStudent, KernelAttentionStudent
from ._lm_training import train_causal_lm
from ._tiny_files import DEFAULT_MODEL_FILE, load_default_model, save_tiny_lm
from ._loading import (
    PACKAGED_MODELS,
    LoadedModel,
    ModelNotInstalledError,
    PackagedModel,
    as_causal_lm,
    as_model_adapter,
    load_model,
    packaged_model_path,
)
from ._saving import save_model_folder
from ._digest import model_digest
from ._prompted import PromptedLM, random_prompt_hidden_states
from ._registry import STUDENTS, make_student
from ._rotary_students import RotarySoftmaxStudent
from ._students import (
    FixedOperatorStudent,
    LinearAttentionStudent,
    RankBatchedStudent,
    SoftmaxAttentionStudent,
    TransformerBlockStudent,
    row_softmax,
)
from ._min_ip_constructions import (
    dense_error_bound,
    dense_min_ip_head,
    one_hot_min_ip_head,
    rank_one_min_ip_head,
    tensor_product_min_ip_head,
)
from ._distillation import distill_slots
from ._triple_heads import TripleAttentionHead
from ._triple_training import fit_triple_heads

__all__ = [
    # model loading
    "DEFAULT_MODEL_FILE",
    "PACKAGED_MODELS",
    "LoadedModel",
    "ModelNotInstalledError",
    "PackagedModel",
    "as_causal_lm",
    "as_model_adapter",
    "load_default_model",
    "load_model",
    "model_digest",
    "packaged_model_path",
    "save_model_folder",
    "save_tiny_lm",
    # causal LMs, adapters and prompted LMs
    "CausalLMAdapter",
    "HFCausalLMAdapter",
    "HFEncoderAdapter",
    "PromptedLM",
    "TinyCausalLM",
    "TinyLMAdapter",
    "check_causal",
    "greedy_decode",
    "load_gguf_causal_lm",
    "load_gguf_tokenizer",
    "load_hf_causal_lm",
    "load_hf_model",
    "load_hf_tokenizer",
    "random_prompt_hidden_states",
    "train_causal_lm",
    # per-head weights, attention maps and model introspection
    "AttentionLayer",
    "HEAD_FAMILIES",
    "HeadFamily",
    "HeadNorm",
    "QueryKeyHeads",
    "attention_layers",
    "attention_maps",
    "check_token_inputs",
    "model_max_positions",
    "model_vocab_size",
    "query_key_weights",
    "soft_cap",
    "unwrap_model",
    "value_weights",
    "visible_keys",
    # students and Min-IP heads
    "STUDENTS",
    "DenseAttentionStudent",
    "DenseSoftmaxHead",
    "FixedOperatorStudent",
    "KernelAttentionStudent",
    "LinearAttentionStudent",
    "NormalizedKernelHead",
    "RankBatchedStudent",
    "ROPE_LAYOUTS",
    "RotarySoftmaxStudent",
    "SoftmaxAttentionStudent",
    "TransformerBlockStudent",
    "KERNEL_STUDENT_MAPS",
    "TripleAttentionHead",
    "fit_triple_heads",
    "one_hot_min_ip_head",
    "tensor_product_min_ip_head",
    "dense_error_bound",
    "dense_min_ip_head",
    "distill_slots",
    "make_student",
    "normalized_kernel_attention",
    "rank_one_min_ip_head",
    "rope_frequencies",
    "rope_tables",
    "rotate",
    "row_softmax",
    # kernel feature maps
    "FEATURE_MAPS",
    "elu_plus_one_features",
    "exp_features",
    "favor_features",
    "gaussian_projection",
    "hedgehog_features",
    "relu_features",
    "taylor_feature_count",
    "taylor_features",
]

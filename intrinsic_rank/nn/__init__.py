"""Torch modules: the ladder's students (B0-B3), Min-IP heads and prompted causal LMs.

Rooms of this package:

* model loading (``_loading``): :func:`load_model` resolves whatever names a
  model -- ``"default"``, a packaged name, a ``.pt`` file, a Hugging Face
  folder, an instance or an adapter -- and :func:`as_causal_lm` /
  :func:`as_model_adapter` wrap the result for reachability and geometry;
* causal LMs and adapters (``_causal_lm``, ``_hf``), prompted LMs
  (``_prompted``) and their training (``_lm_training``); the decoder cells of
  a model's output head, by Monte Carlo on the device (``_decoder_cells``);
* per-head weights, attention maps and model introspection (``_heads``);
* the rank-batched students and Min-IP heads (``_students``,
  ``_kernel_attention``, ``_registry``).
"""

from ._causal_lm import CausalLMAdapter, TinyCausalLM, TinyLMAdapter, check_causal
from ._decoder_cells import check_decoder, decoder_cell_proportions
from ._heads import (
    QueryKeyHeads,
    attention_maps,
    check_token_inputs,
    model_max_positions,
    model_vocab_size,
    query_key_weights,
    unwrap_model,
)
from ._hf import (
    HFCausalLMAdapter,
    HFEncoderAdapter,
    load_hf_causal_lm,
    load_hf_model,
    load_hf_tokenizer,
)
from ._kernel_attention import (
    FEATURE_MAPS,
    KERNEL_STUDENT_MAPS,
    TripleAttentionHead,
    fit_triple_heads,
    one_hot_min_ip_head,
    tensor_product_min_ip_head,
    DenseAttentionStudent,
    DenseSoftmaxHead,
    KernelAttentionStudent,
    NormalizedKernelHead,
    dense_error_bound,
    dense_min_ip_head,
    normalized_kernel_attention,
    rank_one_min_ip_head,
)
from ._lm_training import train_causal_lm
from ._loading import (
    DEFAULT_MODEL_FILE,
    PACKAGED_MODELS,
    LoadedModel,
    PackagedModel,
    as_causal_lm,
    as_model_adapter,
    load_default_model,
    load_model,
    packaged_model_path,
    save_tiny_lm,
)
from ._prompted import PromptedLM, random_prompt_hidden_states
from ._registry import STUDENTS, make_student
from ._students import (
    FixedOperatorStudent,
    LinearAttentionStudent,
    RankBatchedStudent,
    SoftmaxAttentionStudent,
    TransformerBlockStudent,
    row_softmax,
)

__all__ = [
    # model loading
    "DEFAULT_MODEL_FILE",
    "PACKAGED_MODELS",
    "LoadedModel",
    "PackagedModel",
    "as_causal_lm",
    "as_model_adapter",
    "load_default_model",
    "load_model",
    "packaged_model_path",
    "save_tiny_lm",
    # causal LMs, adapters and prompted LMs
    "CausalLMAdapter",
    "HFCausalLMAdapter",
    "HFEncoderAdapter",
    "PromptedLM",
    "TinyCausalLM",
    "TinyLMAdapter",
    "check_causal",
    "check_decoder",
    "decoder_cell_proportions",
    "load_hf_causal_lm",
    "load_hf_model",
    "load_hf_tokenizer",
    "random_prompt_hidden_states",
    "train_causal_lm",
    # per-head weights, attention maps and model introspection
    "QueryKeyHeads",
    "attention_maps",
    "check_token_inputs",
    "model_max_positions",
    "model_vocab_size",
    "query_key_weights",
    "unwrap_model",
    # students and Min-IP heads
    "STUDENTS",
    "DenseAttentionStudent",
    "DenseSoftmaxHead",
    "FixedOperatorStudent",
    "KernelAttentionStudent",
    "LinearAttentionStudent",
    "NormalizedKernelHead",
    "RankBatchedStudent",
    "SoftmaxAttentionStudent",
    "TransformerBlockStudent",
    "FEATURE_MAPS",
    "KERNEL_STUDENT_MAPS",
    "TripleAttentionHead",
    "fit_triple_heads",
    "one_hot_min_ip_head",
    "tensor_product_min_ip_head",
    "dense_error_bound",
    "dense_min_ip_head",
    "make_student",
    "normalized_kernel_attention",
    "rank_one_min_ip_head",
    "row_softmax",
]

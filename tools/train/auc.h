#pragma once

// RocAuc: the area under the ROC curve of click scores against 0/1 labels,
// the probability that a random positive example scores above a random
// negative one (ties count one half), as sklearn's roc_auc_score.
//
// Thread safety: a pure function.

#include <span>

namespace ember::train {

// Labels >= 0.5 are positives. Exact: sorts the scores (O(n log n)) and
// ranks ties by their mean rank. NaN when either class is absent or a score
// is NaN (a diverged model). Throws
// InvalidArgument when the spans' sizes differ.
[[nodiscard]] double RocAuc(std::span<const float> scores, std::span<const float> labels);

}  // namespace ember::train

#ifndef DPCURATOR_CORE_LDP_WASSERSTEIN_H_
#define DPCURATOR_CORE_LDP_WASSERSTEIN_H_

// The evaluation metric of the LDP paper's image experiments (Reshetova,
// Chen & Ozgur, Sec. 4.5 and 5.5, Fig. 5 left and Fig. 11;
// ldp-sinkhorn.md Sec. 3 "Metrics"): the 2-Wasserstein distance between
// generated samples and clean held-out data,
//   W2(X, Y) = sqrt( min_sigma (1/n) sum_i ||x_i - y_sigma(i)||_2^2 ),
// for equal-size uniform samples, solved exactly as a linear assignment
// problem (Birkhoff; ldp::SolveAssignment, Jonker-Volgenant) with the
// squared-l2 cost in double. The paper leaves the solver and the sample
// sizes open; exact assignment is O(n^3) worst case, about a second at
// n = 1000 in 784 dimensions, so a pooled 10-class sample is scored class by
// class (ClassConditionalW2) rather than as one 10000-point problem.

#include <vector>

#include "Eigen/Core"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace dpcurator::ldp {

// Exact W2 between the uniform measures on the rows of `x` and `y` (n x d
// each, same n >= 1, finite), for float samples such as images (one image
// per row). The cost matrix is formed in double.
absl::StatusOr<double> ExactW2(const Eigen::Ref<const Eigen::MatrixXf>& x,
                               const Eigen::Ref<const Eigen::MatrixXf>& y);

struct ClassConditionalW2Result {
  // W2 between the first `per_class` rows of class c in each set.
  std::vector<double> per_class;
  // Their unweighted mean over classes (the classes are balanced).
  double mean = 0.0;
};

// W2 per class between labelled samples: for every class c in
// [0, num_classes), the first `per_class` rows of `x` labelled c against the
// first `per_class` rows of `y` labelled c. Fails (naming the class and the
// side) if a class has fewer than `per_class` rows, on a label outside the
// range, or on mismatched shapes.
absl::StatusOr<ClassConditionalW2Result> ClassConditionalW2(
    const Eigen::Ref<const Eigen::MatrixXf>& x, absl::Span<const int> x_labels,
    const Eigen::Ref<const Eigen::MatrixXf>& y, absl::Span<const int> y_labels, int num_classes,
    int per_class);

}  // namespace dpcurator::ldp

#endif  // DPCURATOR_CORE_LDP_WASSERSTEIN_H_

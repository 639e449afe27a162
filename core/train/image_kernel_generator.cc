#include "core/train/image_kernel_generator.h"

#include <cstdint>

namespace dpcurator::train {

void ImageKernelGenerator::Sample(int count, PublicRng* rng, Eigen::MatrixXd* points,
                                  Eigen::VectorXi* labels) {
  Eigen::MatrixXd z(count, generator_.code_dim());
  rng->FillNormal(z);
  labels->resize(count);
  for (int i = 0; i < count; ++i) {
    (*labels)(i) =
        static_cast<int>(rng->UniformInt(static_cast<uint64_t>(generator_.num_classes())));
  }
  const Eigen::MatrixXf z_f = z.cast<float>();
  *points = generator_.Forward(z_f, *labels, /*training=*/true, &workspace_).cast<double>();
  if (generator_.num_classes() == 1) labels->resize(0);
}

void ImageKernelGenerator::Update(const Eigen::MatrixXd& point_gradients) {
  grad_.setZero();
  generator_.Backward(point_gradients.cast<float>(), &workspace_, grad_);
  status_.Update(adam_.Step(master_, grad_.cast<double>()));
  generator_.parameters() = master_.cast<float>();
}

}  // namespace dpcurator::train

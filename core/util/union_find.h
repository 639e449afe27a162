#ifndef DPCURATOR_CORE_UTIL_UNION_FIND_H_
#define DPCURATOR_CORE_UTIL_UNION_FIND_H_

#include <algorithm>
#include <numeric>
#include <vector>

namespace dpcurator {

// Disjoint sets over 0..n-1 (Tarjan 1975) with path halving; a union makes
// the smaller root the parent, so the structure depends only on the calls
// made. The forests of MST's tree, AIM's wide form and the junction tree's
// spanning tree share it.
class UnionFind {
 public:
  explicit UnionFind(int n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  int Find(int x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  // Joins the sets of a and b; false when they were one set already.
  bool Union(int a, int b) {
    a = Find(a);
    b = Find(b);
    if (a == b) return false;
    parent_[std::max(a, b)] = std::min(a, b);
    return true;
  }

 private:
  std::vector<int> parent_;
};

}  // namespace dpcurator

#endif  // DPCURATOR_CORE_UTIL_UNION_FIND_H_

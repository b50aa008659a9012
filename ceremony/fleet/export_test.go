package fleet

// Untouched is (*Options).untouched, for the tests of package fleet_test,
// which hold the clusters.
var Untouched = (*Options).untouched

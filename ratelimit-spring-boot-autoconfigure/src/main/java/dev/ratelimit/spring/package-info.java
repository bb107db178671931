/**
 * The auto-configuration: properties, one bean per bucket, the registry and the backend seam.
 */
@NullMarked
package dev.ratelimit.spring;

import org.jspecify.annotations.NullMarked;

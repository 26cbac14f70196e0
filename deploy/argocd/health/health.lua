-- Argo CD health of the provider's kinds (MaasMachine, MaasCluster, MaasHost, MaasIPPool and
-- every other kind with a status), read from their conditions, which all follow one scheme:
-- `Ready` summarises the others, `Paused` says whether reconciling is stopped.
--
--   Suspended    Paused=True: the Cluster or the object is paused (clusterctl move, by hand).
--   Degraded     a condition is False or Unknown for a reason a person has to act on (below).
--   Healthy      Ready=True for the current generation.
--   Progressing  anything else: no status yet, a spec change not yet seen, deploying, waiting.
--
-- Only Lua's base and table libraries are used, so it runs without
-- `resource.customizations.useOpenLibs` (Argo CD's default for health checks in argocd-cm).

-- Reasons that do not clear up on their own: MAAS says no, a definition is wrong, capacity
-- is missing, a credential is refused. Any other not-ready reason is a wait.
local needs_a_person = {
  AllocationFailed = true, BoundToAnotherHost = true, DNSNameTaken = true, HeldByOther = true,
  HostMissing = true, InvalidPool = true, InvalidSpec = true, KubeconfigInvalid = true,
  KubeconfigRefused = true, KubeconfigUnreadable = true, LoadBalancerFailed = true,
  MAASRangeRefused = true, MAASSubnetMismatch = true, MaasUnavailable = true,
  MachineBroken = true, MachineDeployFailed = true, MachineMissing = true,
  MachineNotFound = true, MachinePoweredOff = true, MachineStateUndefined = true,
  MachinesImportedElsewhere = true, NoCapacityInFailureDomain = true, NoHostAvailable = true,
  NotRegistered = true, PoolExhausted = true, PowerStateUnknown = true, ReleaseFailed = true,
  RemediationFailed = true, RenderFailed = true, TemplateNotFound = true,
}

-- A condition's message, else its reason.
local function text(condition)
  if condition.message ~= nil and condition.message ~= "" then
    return condition.message
  end
  return condition.reason or condition.status
end

-- What a Healthy object shows in the Argo CD UI.
local function summary(o, ready)
  local s = o.status
  if o.kind == "MaasMachine" and s.hostRef ~= nil and s.systemID ~= nil then
    return "Deployed on host " .. s.hostRef.name .. " (MAAS " .. s.systemID .. ")"
  end
  if o.kind == "MaasHost" and s.provisioningState ~= nil then
    return s.provisioningState .. " (MAAS " .. (s.maasStatusName or "status unknown") .. ")"
  end
  if o.kind == "MaasIPPool" and s.addressesInUse ~= nil and s.addressesFree ~= nil then
    return s.addressesInUse .. " addresses in use, " .. s.addressesFree .. " free"
  end
  if o.kind == "MaasCluster" and o.spec ~= nil and o.spec.controlPlaneEndpoint ~= nil
      and o.spec.controlPlaneEndpoint.host ~= nil then
    local ep = o.spec.controlPlaneEndpoint
    return "Control plane endpoint " .. ep.host .. ":" .. (ep.port or 6443)
  end
  return text(ready)
end

local function health(o)
  local conditions = {}
  if o.status ~= nil and o.status.conditions ~= nil then
    for _, c in ipairs(o.status.conditions) do
      conditions[c.type] = c
    end
  end
  local ready = conditions["Ready"]
  if ready == nil then
    return { status = "Progressing", message = "Waiting for the controller to report status" }
  end
  local paused = conditions["Paused"]
  if paused ~= nil and paused.status == "True" then
    return { status = "Suspended", message = "Paused: " .. text(paused) }
  end
  -- A spec change not yet reconciled: what the conditions say is about the old spec.
  local generation = o.metadata.generation
  if generation ~= nil and ready.observedGeneration ~= nil and ready.observedGeneration < generation then
    return { status = "Progressing", message = "Waiting for generation " .. generation .. " to be reconciled" }
  end
  -- Ready first: its reason is that of the first failing condition it summarises.
  if ready.status ~= "True" and needs_a_person[ready.reason] then
    return { status = "Degraded", message = text(ready) }
  end
  for _, c in ipairs(o.status.conditions) do
    if c.type ~= "Ready" and c.type ~= "Paused" and c.status ~= "True" and needs_a_person[c.reason] then
      return { status = "Degraded", message = c.type .. ": " .. text(c) }
    end
  end
  if ready.status == "True" then
    return { status = "Healthy", message = summary(o, ready) }
  end
  return { status = "Progressing", message = text(ready) }
end

return health(obj)
